"""Layer-wise relevance propagation (Bach et al. 2015): the target logit's value is
propagated back, layer by layer, to the input embeddings, and a token's score is the
sum of its word embedding's relevance. Signed: positive = evidence for ``target``.

Rules (``faithbench.benchmark.core.lrp``), the ε-rule everywhere with Arras et al.'s
defaults (eps = 0.001, bias_factor = 0):

- the BiLSTM models (Arras, Montavon, Müller & Samek 2017): the ε-rule on every linear
  map and every sum (the LSTM cell c = f⊙c' + i⊙g, the attention context Σ α_t h_t,
  the NLI difference p − h); sigmoid gates and attention weights held constant, so the
  signal they multiply takes all the relevance ("signal-take-all"); tanh and |x| pass
  relevance unchanged; the NLI product p ⊙ h gives half to each side;
- BERT-architecture Transformers (conservative propagation, Ali et al. 2022):
  LayerNorm's scale 1/σ and the attention probabilities held constant, the ε-rule on
  the linear maps, the residual sums and the word + position + type embedding sum;
  GELU and the pooler's tanh pass relevance unchanged. Position, type and special-token
  embeddings keep their share: the tokens' scores are the word embeddings' part.

What is conserved: relevance enters as the target logit and is redistributed exactly,
except for the share that biases and ε absorb at each ε-rule (bias_factor = 0 gives
biases no relevance to pass on). With zero biases the token scores sum to the target
logit up to ε's share; ``tests/test_lrp.py`` checks both against an independent
numpy implementation.

The model must offer ``LRP`` (``lrp_logits``): the BiLSTM sentiment, NLI and synthetic
models, the alignment seq2seq (GRUs: the reset and update gates constant, relevance of
the next target word's logit to the source words), BERT-architecture Transformers
(MiniLM: attention held constant, Ali et al. 2022) and Llama-layout decoders (Llama,
Qwen2, Mistral: AttnLRP's rules, Achtibat et al. 2024, relevance through the attention
weights too; ``faithbench.benchmark.core.lrp``) do; other ``--model-path``
architectures (GPT-2 among them) do not: a run leaves ``lrp`` out there, and asking for
it names the missing capability.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import EMBEDDINGS, LRP, Batch, ExplainableModel, ExplainerSpec, Target


@dataclass(frozen=True)
class LRPExplainer:
    eps: float = 0.001
    spec: ExplainerSpec = field(init=False)  # derived from eps

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="lrp",
            version="1",
            requires=frozenset({LRP, EMBEDDINGS}),
            params=(("eps", self.eps),),
            deterministic=True,
            citation="Arras, Montavon, Müller & Samek 2017, Explaining recurrent neural "
                     "network predictions in sentiment analysis; Ali, Schnake, Eberle, "
                     "Montavon, Müller & Wolf 2022, XAI for Transformers: better "
                     "explanations through conservative propagation; Bach, Binder, "
                     "Montavon, Klauschen, Müller & Samek 2015, On pixel-wise explanations "
                     "for non-linear classifier decisions by layer-wise relevance propagation",
            description="LRP-ε from the target logit to the embeddings; gates, attention "
                        "weights and LayerNorm scales constant; summed per token.",
            cost="1 fwd + 1 bwd",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) signed relevance; zero at padding."""
        with torch.enable_grad():
            embeds = model.embed(batch).detach().requires_grad_(True)  # (B, T, D)
            logits = model.lrp_logits(embeds, batch, self.eps)  # type: ignore[attr-defined]
            start = torch.zeros_like(logits)  # the target logit's value is the relevance
            picked = target.view(-1, 1).to(logits.device)
            start.scatter_(1, picked, logits.detach().gather(1, picked))
            (relevance,) = torch.autograd.grad(logits, embeds, grad_outputs=start)
        return relevance.sum(dim=-1).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = LRPExplainer()
