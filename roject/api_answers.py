"""The shape of the API's error answers, declared per endpoint so the OpenAPI docs list them."""

from ninja import Schema


class ErrorOut(Schema):
    """Every error answer: one sentence saying what went wrong and, where it helps, what to do."""

    detail: str


class InvalidOut(Schema):
    """422: the fields of the request that do not match its schema."""

    detail: list[dict]


def answers(ok, *errors: int) -> dict:
    """`response=` for an endpoint: `ok` for 200, then its error statuses.

    Every endpoint may answer 401 (not logged in) and 503 (the database is busy or down).
    """
    codes = sorted({401, 503, *errors})
    return {200: ok, **{code: InvalidOut if code == 422 else ErrorOut for code in codes}}
