"""Import every module that registers algorithms, datasets, scenarios and models."""

import fedcluster.algorithms.cfl  # noqa: F401
import fedcluster.algorithms.cflgp  # noqa: F401
import fedcluster.algorithms.fedavg  # noqa: F401
import fedcluster.algorithms.fedem  # noqa: F401
import fedcluster.algorithms.fedmd  # noqa: F401
import fedcluster.algorithms.fedrc  # noqa: F401
import fedcluster.algorithms.fedsoft  # noqa: F401
import fedcluster.algorithms.fesem  # noqa: F401
import fedcluster.algorithms.hcfl  # noqa: F401
import fedcluster.algorithms.hcfl_presets  # noqa: F401
import fedcluster.algorithms.icfl  # noqa: F401
import fedcluster.algorithms.ifca  # noqa: F401
import fedcluster.algorithms.oneshot  # noqa: F401
import fedcluster.algorithms.oracle  # noqa: F401
import fedcluster.algorithms.pacfl  # noqa: F401
import fedcluster.algorithms.stocfl  # noqa: F401
import fedcluster.data.datasets  # noqa: F401
import fedcluster.data.scenarios.basic  # noqa: F401
import fedcluster.data.scenarios.diverse  # noqa: F401
import fedcluster.data.scenarios.mixture  # noqa: F401
import fedcluster.data.scenarios.noisy  # noqa: F401
import fedcluster.data.scenarios.rotation  # noqa: F401
import fedcluster.data.scenarios.synthetic  # noqa: F401
import fedcluster.models.mobilenet  # noqa: F401
import fedcluster.models.resnet  # noqa: F401
import fedcluster.models.zoo  # noqa: F401
