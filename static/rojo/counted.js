// A count with its noun in the right number ("1 file", "3 files"): every count the page
// shows goes through here, so none reads "1 files".

const number = new Intl.NumberFormat("en-US");
const rules = new Intl.PluralRules("en-US");

/** `count` with thousands separators, then `singular` for one, else `plural`
 * (default: `singular` + "s"). */
export function counted(count, singular, plural = `${singular}s`) {
  return `${number.format(count)} ${rules.select(count) === "one" ? singular : plural}`;
}

/** One of two words by `count`'s number: a verb or pronoun that agrees with a counted noun. */
export function agreeing(count, one, other) {
  return rules.select(count) === "one" ? one : other;
}
