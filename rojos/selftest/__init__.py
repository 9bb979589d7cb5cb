"""The provider self-test: a short, bounded set of requests that finds what a rojo's provider
and model do, kept as the model's capability profile (read by `rojos.models.capabilities`)."""
