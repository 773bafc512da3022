"""The built-in metrics: importing this module imports each metric module, which registers its metrics with
`@register_metric` (see `nmtkit.registry`). A new metric is one file, and one line here."""

import nmtkit.metrics.bleu  # noqa: F401
import nmtkit.metrics.chrf  # noqa: F401
import nmtkit.metrics.edit  # noqa: F401
import nmtkit.metrics.ter  # noqa: F401
import nmtkit.metrics.wer  # noqa: F401
