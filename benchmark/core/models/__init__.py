"""Shared model building blocks: embeddings, BiLSTM encoder, additive attention,
the attention classifier of the attention debate, a small seq2seq, training."""
