"""Reading /metrics the way Prometheus does: with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

# /metrics names every live session, so it needs the admin token or a scraper's own (issue 42): the tests' scraper
SCRAPER = "metrics-token-of-the-tests-0123"
AS_SCRAPER = {"Authorization": f"Bearer {SCRAPER}"}


def samples(text: str) -> dict[str, float]:
    """'name{a="1",b="2"}' (labels sorted) or 'name' → value, for every sample of the exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out
