"""Misbehaving plugin: switches the model to train mode (dropout on) and leaves it so."""

from faithbench.api import ExplainerSpec


class CallsTrain:
    spec = ExplainerSpec(name="misbehaves_train", version="1", deterministic=False)

    def explain(self, model, batch, target, *, rng):
        model.train()
        return batch.mask.float()


EXPLAINER = CallsTrain()
