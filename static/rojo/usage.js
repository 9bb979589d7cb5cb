// What a turn cost, shown small under its reply: stored turns' figures come with the history,
// a live turn's are asked for once it is done (with the conversation's total and the meter).

import { getJson } from "./api.js";
import { counted } from "./counted.js";
import { bubbleTitle } from "./message-times.js";
import { usageText } from "./render.js";

/** A turn's tokens and cost under its reply (drawn by CSS from `data-usage`, so the reply's
 * own text stays the reply's), the details on hover. */
function showUsage(reply, tokens) {
  if (!tokens || !tokens.calls) return;
  reply.dataset.text = reply.text; // as its render sets it: the same markup live and replayed
  reply.dataset.usage = usageText(tokens);
  reply.details =
    `This reply: ${counted(tokens.calls, "model call")}` +
    (tokens.reasoning ? `, ${counted(tokens.reasoning, "reasoning token")}` : "") +
    (tokens.estimated ? "; the provider did not count them all, so some are estimates" : "");
  bubbleTitle(reply); // beside the time the pointer shows, never instead of it
}

/** Show the turn's tokens and cost under the panel's last reply; a promise while they load. */
export function turnUsageShow(panel, turnMessage) {
  const reply = panel.log.lastReply;
  panel.log.lastReply = null;
  if (panel.history) {
    if (reply) showUsage(reply, panel.history.usage?.turns?.[turnMessage]);
    return null;
  }
  if (!panel.conversationId) return null;
  return getJson(`/api/conversations/${panel.conversationId}/usage`)
    .then((usage) => {
      if (reply) showUsage(reply, usage.turns[turnMessage]);
      panel.dispatchEvent(new CustomEvent("usage", { detail: usage }));
    })
    .catch(() => {}); // the figures are a nicety: the reply is there without them
}
