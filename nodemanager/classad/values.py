"""Numbers and booleans read from a ClassAd (or a plain dict of one), shared by the HTCondor
adapter's classifier and the core's victim estimates, so neither reaches into the other."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ad_number", "ad_true"]

_AD_LIMIT = 2.0**63  # a ClassAd integer is 64-bit: a value beyond it is no count or time


def ad_number(ad: Mapping[str, Any], key: str) -> float | None:
    """A numeric ad attribute, or None when absent, not a number (booleans and classad2 Values are
    not numbers), not finite (``real("INF")``, NaN) or beyond a 64-bit integer."""
    v: Any = ad.get(key)
    t = type(v)
    if t is float:  # the common case, checked first: this runs for every ad every cycle
        return v if -_AD_LIMIT < v < _AD_LIMIT else None  # false for inf and NaN too
    if t is int and -_AD_LIMIT < v < _AD_LIMIT:
        return float(v)
    return None


def ad_true(ad: Mapping[str, Any], key: str) -> bool:
    """True when the attribute is the boolean true (or the string ``"true"``, any case)."""
    v = ad.get(key)
    return v is True or (isinstance(v, str) and v.lower() == "true")
