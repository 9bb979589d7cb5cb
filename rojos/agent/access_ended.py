"""What a call is answered, and a turn ends with, once its user may no longer act: removed
from the project (or deactivated), made a viewer, the API token the turn was asked with
revoked or expired, or the login session it was asked in ended (logged out, or the password
changed, which ends every other session). The runner reads the role (and the token or the
session) again before each step and each call (rojos.agent.tool_calls)."""

from rojos.tools import ToolOutcome

REVOKED_OUTCOME = ToolOutcome.failure(
    "your role in this project no longer lets you change its files (you were removed "
    "from it or made a viewer while this reply ran)"
)
REVOKED = REVOKED_OUTCOME.result
REMOVED_OUTCOME = ToolOutcome.failure(
    "you are no longer a member of this project (you were removed from it while this reply "
    "ran): nothing of it can be read or changed"
)
# The turn's ERROR once its user is found removed from the project.
REMOVED_MESSAGE = "You are no longer a member of this project, so this reply was stopped."
# The same, for a turn asked with an API token since revoked or expired.
TOKEN_ENDED_OUTCOME = ToolOutcome.failure(
    "the API token this reply was asked with was revoked or has expired: nothing of this "
    "project can be read or changed"
)
TOKEN_ENDED_MESSAGE = (
    "The API token this reply was asked with was revoked or has expired, so it was stopped."
)
# The same, for a turn asked in a login session that has ended.
SESSION_ENDED_OUTCOME = ToolOutcome.failure(
    "the login session this reply was asked in has ended (logged out, or the password was "
    "changed): nothing of this project can be read or changed"
)
SESSION_ENDED_MESSAGE = (
    "The login session this reply was asked in has ended (logged out, or the password was "
    "changed), so it was stopped."
)
