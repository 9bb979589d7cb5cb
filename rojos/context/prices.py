"""Model prices, prefilled from the `genai-prices` package's table, offline.

The package ships its table as data (updating it from the network is opt-in, and never
done here), so a rojo of a known model gets its prices per million input, cached-input and
output tokens without any network access; an administrator edits them in the admin. A
price that varies with the prompt's length (Gemini's tiers) is taken at its base rate.
"""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from rojos.models import Rojo

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Prices:
    """US dollars per million tokens."""

    input: Decimal
    cached_input: Decimal | None
    output: Decimal


def _rate(price) -> Decimal | None:
    if price is None:
        return None
    return Decimal(str(getattr(price, "base", price)))


def prices_lookup(*, model: str, base_url: str = "") -> Prices | None:
    """The table's prices for `model` (served at `base_url`, when that names the provider)."""
    from genai_prices.data_snapshot import get_snapshot  # a 1.5 MB table: loaded on use

    snapshot = get_snapshot()
    found = None
    for api_url in (base_url or None, None):
        try:
            found = snapshot.find_provider_model(model, None, None, api_url)
            break
        except LookupError:
            continue
    if found is None:
        return None
    price = found[1].get_prices(datetime.now(tz=UTC))
    input_price, output_price = _rate(price.input_mtok), _rate(price.output_mtok)
    if input_price is None or output_price is None:
        return None
    return Prices(input=input_price, cached_input=_rate(price.cache_read_mtok), output=output_price)


def rojo_prices_prefill(rojo: Rojo) -> bool:
    """Fill a rojo's empty prices from the table when its model is known; whether it did."""
    if rojo.price_input is not None or rojo.price_output is not None:
        return False
    try:
        prices = prices_lookup(model=rojo.model, base_url=rojo.base_url)
    except (ValueError, TypeError, AttributeError):  # a table entry of an unexpected shape
        logger.warning("no price for model %r: the price table failed", rojo.model, exc_info=True)
        return False
    if prices is None:
        return False
    rojo.price_input = prices.input
    rojo.price_cached_input = prices.cached_input
    rojo.price_output = prices.output
    return True
