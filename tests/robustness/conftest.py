"""Hypothesis profiles for the property tests (tests/robustness/test_properties_*.py).

`ci` (the default) keeps every property fast enough for each CI run: 200 examples, no deadline
(the machine is shared; wall time is never asserted). `campaign` is the long run of
docs/developing.md: `HYPOTHESIS_PROFILE=campaign` (examples per property from
`HYPOTHESIS_CAMPAIGN_EXAMPLES`, default 20,000). A test that sets `max_examples` itself keeps it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
CAMPAIGN_EXAMPLES_ENV = "HYPOTHESIS_CAMPAIGN_EXAMPLES"

settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile(
    "campaign",
    max_examples=int(os.environ.get(CAMPAIGN_EXAMPLES_ENV, "20000")),
    deadline=None,
    # Large generated inputs are the point of a campaign, not a health problem.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))
