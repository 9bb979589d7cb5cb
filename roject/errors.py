"""The one base type of the errors the app raises on purpose."""


class AppError(Exception):
    """A failure whose message is written for whoever caused it: the person, or the model.

    It carries no HTTP status: the same errors reach the chat command, replay and the tools
    (where a StorageError is a result the model reads). The web layer picks each status in
    one table (rojos/web/errors.py), and answers any other AppError as a bad request.
    """
