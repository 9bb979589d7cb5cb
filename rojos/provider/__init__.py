"""An OpenAI-compatible provider: the request, the stream, failures, refusals, clients."""
