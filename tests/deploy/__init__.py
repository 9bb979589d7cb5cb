"""The image, the compose stack, the doctor, graceful restarts."""
