"""The experiments of the papers in ../shared/seeds, run against edgeflow and its peers in one go.

Each experiment module has `run(out, quick, switches)`, which writes `<name>.md`, `<name>.csv` and
`<name>.png` under `out` and returns its tables.
"""

from . import afdx, churn, fastpath, framerate, gateway, latency, less, p4, scale, tsn, zodiac, zynq

EXPERIMENTS = {
    "zodiac": zodiac,
    "zynq": zynq,
    "framerate": framerate,
    "latency": latency,
    "gateway": gateway,
    "fastpath": fastpath,
    "afdx": afdx,
    "tsn": tsn,
    "less": less,
    "churn": churn,
    "p4": p4,
    "scale": scale,
}
