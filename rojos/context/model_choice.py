"""The model in use: which model a turn asks, and what is per model, read through one view.

A rojo has a default model (`Rojo.model`, whose window, prices, calibration and quirks are on
the rojo's own row) and may offer others (`ModelOption` rows, or any model its provider
lists: rojos.context.model_listing). A conversation picks one (`Conversation.model`, empty for
the default) and a turn may use another (a regenerate with another model). Request building,
the window meter, usage pricing and compaction read `ModelInUse`, never `rojo.model`, so the
window, prices and capabilities follow the model; what a turn learns (a window listed or
refused, the characters per token, a refused option) is stored where that model's values
live (`ModelInUse.learned_save`).
"""

from roject.errors import AppError
from rojos.context.prices import prices_lookup
from rojos.models import ModelOption, Rojo

# The fields a rojo's row and a ModelOption row both hold, one set per model.
PER_MODEL_FIELDS = (
    "context_window",
    "listed_window",
    "refused_window",
    "chars_per_token",
    "stream_usage_refused",
    "price_input",
    "price_cached_input",
    "price_output",
)
# The most models a picker lists (a gateway may list hundreds).
MODELS_SHOWN = 500


class ModelNotOffered(AppError):
    """A model the rojo does not let people pick (the chat's, a regenerate's, the picker's)."""


class ModelInUse:
    """One model of a rojo as a turn, the meter and the pricing see it.

    `source` holds the model's own values: the rojo for its default model, else its
    ModelOption (unsaved until the model has something to keep). The rojo-wide settings a
    window needs (`max_output_tokens`) come from the rojo.
    """

    __slots__ = ("name", "rojo", "source")

    def __init__(self, rojo: Rojo, name: str, source: Rojo | ModelOption) -> None:
        self.rojo = rojo
        self.name = name
        self.source = source

    def __repr__(self) -> str:
        return f"<ModelInUse {self.name!r} of {self.rojo}>"

    @property
    def max_output_tokens(self) -> int | None:
        return self.rojo.max_output_tokens

    @property
    def unpriced_pick(self) -> bool:
        """A model picked from the provider's list (not the default, not offered by an
        administrator) that has no price: what it uses would cost nothing."""
        source = self.source
        return (
            isinstance(source, ModelOption)
            and not source.offered
            and source.price_input is None
            and source.price_output is None
        )

    @property
    def capability_profile(self) -> dict | None:
        """What a self-test learned of this model (`Rojo.capability_profiles`), if anything."""
        profiles = getattr(self.rojo, "capability_profiles", None) or {}
        profile = profiles.get(self.name) if isinstance(profiles, dict) else None
        return profile if isinstance(profile, dict) else None

    async def learned_save(self, **fields) -> None:
        """Keep what a turn learned of the model, in memory and in its row (an option's
        row is made the first time it has something to keep)."""
        for field, value in fields.items():
            setattr(self.source, field, value)
        if isinstance(self.source, Rojo):
            await Rojo.objects.filter(pk=self.rojo.pk).aupdate(**fields)
            return
        option = self.source
        if option.pk is None:
            values = {f: getattr(option, f) for f in PER_MODEL_FIELDS}
            option, _ = await ModelOption.objects.aget_or_create(
                rojo_id=self.rojo.pk, name=self.name, defaults={**values, "offered": False}
            )
            self.source = option
        await ModelOption.objects.filter(pk=option.pk).aupdate(**fields)


def _per_model(field: str) -> property:
    """Read from the model's source; set in memory only (learned_save stores)."""
    return property(
        lambda self: getattr(self.source, field),
        lambda self, value: setattr(self.source, field, value),
        doc=f"The model's {field}.",
    )


for _field in PER_MODEL_FIELDS:
    setattr(ModelInUse, _field, _per_model(_field))


def model_default(rojo: Rojo) -> ModelInUse:
    """The rojo's default model: no query."""
    return ModelInUse(rojo, rojo.model, rojo)


def _option_new(rojo: Rojo, name: str) -> ModelOption:
    """An unsaved option for a model nothing is known of yet: its prices from the table."""
    option = ModelOption(rojo=rojo, name=name, offered=False)
    try:
        prices = prices_lookup(model=name, base_url=rojo.base_url)
    except (ValueError, TypeError, AttributeError):  # a table entry of an unexpected shape
        prices = None
    if prices is not None:
        option.price_input, option.price_output = prices.input, prices.output
        option.price_cached_input = prices.cached_input
    return option


def models_offered(rojo: Rojo, options: list[ModelOption] | None = None) -> list[str]:
    """(Blocking, one query unless `options` are given) The models people may pick on the
    rojo: its default first, then its offered options, then, when it offers any model its
    provider lists, the list as last fetched; each name once, at most MODELS_SHOWN."""
    if options is None:
        options = list(rojo.model_options.filter(offered=True))
    names = [rojo.model, *(option.name for option in options if option.offered)]
    if rojo.any_listed_model:
        names += [name for name in rojo.provider_models or () if isinstance(name, str)]
    return list(dict.fromkeys(names))[:MODELS_SHOWN]


def model_check(rojo: Rojo, name: str) -> str:
    """(Blocking) `name` if people may pick it on the rojo; ModelNotOffered otherwise."""
    if name == rojo.model or name in models_offered(rojo):
        return name
    raise ModelNotOffered(
        f"The rojo {rojo.name!r} does not offer the model {name!r}; pick one of its models "
        "(an administrator adds models in the admin)."
    )


def model_in_use_blocking(rojo: Rojo, name: str = "") -> ModelInUse:
    """(Blocking) The model `name` of the rojo (empty, or one it no longer offers: its
    default), with its values: at most one query."""
    if not name or name == rojo.model:
        return model_default(rojo)
    option = rojo.model_options.filter(name=name).first()
    if option is None or not option.offered:
        if not rojo.any_listed_model or name not in (rojo.provider_models or ()):
            return model_default(rojo)
        option = option or _option_new(rojo, name)
    return ModelInUse(rojo, name, option)


def model_stored(rojo: Rojo, name: str) -> str:
    """What a conversation keeps for `name`: empty for the rojo's default, so a conversation
    on the default follows it when an administrator changes it."""
    return "" if name == rojo.model else name


def conversation_model_after(
    conversation, rojo: Rojo, model: str, *, rojo_changed: bool, fork: bool
) -> str | None:
    """What the conversation keeps as its model after a message asking `model` (empty: its
    own), when that changes: the model asked (not by a fork: a regenerate's model is that
    branch's reply's), else the default when the rojo changed (the old rojo's model means
    nothing to the new one)."""
    if model and not fork:
        stored = model_stored(rojo, model)
        return stored if conversation.model != stored else None
    if rojo_changed and not model and conversation.model:
        return ""
    return None


def option_prices_prefill(option: ModelOption) -> bool:
    """Fill an option's empty prices from the table when its model is known; whether it did."""
    if option.price_input is not None or option.price_output is not None:
        return False
    filled = _option_new(option.rojo, option.name)
    if filled.price_input is None and filled.price_output is None:
        return False
    option.price_input, option.price_output = filled.price_input, filled.price_output
    option.price_cached_input = filled.price_cached_input
    return True
