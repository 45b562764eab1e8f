"""The FedRC paper's real concept-drift data (its Table 3, App. I.1) read from the user's own files, with the
preprocessing of Tahmasbi et al. 2021 (DriftSurf), which the FedRC paper follows. Nothing is downloaded.

* **Airline** (Ikonomovska's flight records, ``airline_14col.data``): the first 58,100 records, the 13 features
  Year, Month, DayofMonth, DayOfWeek, CRSDepTime, CRSArrTime, UniqueCarrier, FlightNum, ActualElapsedTime, Origin,
  Dest, Distance, Diverted, and the label "delayed" (ArrDelay > 0). As Tahmasbi et al. preprocess it: the
  categorical features (the carrier and the airports, the columns that are not numbers) one-hot encoded, the
  others min-max normalised to [0, 1].
* **Electricity** (Harries 1999, the normalised Elec2 of MOA/OpenML, ``electricity-normalized.csv``, 45,312
  records): as Tahmasbi et al. read it, the weekday one-hot (7) and period, nswprice, nswdemand, vicprice,
  vicdemand, transfer (already in [0, 1]): 13 features (the date is dropped); the label "price UP".

The FedRC paper "construct[s] two test datasets that have concept shifts with each other, and have balanced label
distribution"; it does not say how. Here the two test sets are drawn from the two ends of the stream, where the
concept has drifted furthest apart: each holds :data:`TEST_SHARE` of the records, half of each label, drawn (with a
fixed seed, the same for every run) from the first and from the last quarter of the stream. They are stored one after
the other as the test split (first half: the stream's start), which the ``stream-drift`` scenario gives to two test
clients; every other record is the training pool. Each row is an input [1, 1, d].
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fedcluster.data.sources.base import ArrayDataset
from fedcluster.errors import DataFileError

AIRLINE_RECORDS = 58_100  # the FedRC paper: "we utilized the initial 58100 data points"
AIRLINE_COLUMNS = ("Year", "Month", "DayofMonth", "DayOfWeek", "CRSDepTime", "CRSArrTime", "UniqueCarrier",
                   "FlightNum", "ActualElapsedTime", "Origin", "Dest", "Distance", "Diverted", "ArrDelay")
AIRLINE_FILES = ("airline_14col.data", "airline.csv")
ELECTRICITY_COLUMNS = ("date", "day", "period", "nswprice", "nswdemand", "vicprice", "vicdemand", "transfer",
                       "class")
ELECTRICITY_FILES = ("electricity-normalized.csv", "elec2.csv")
AIRLINE_NEEDS = ("airline_14col.data (Ikonomovska's airline records, comma-separated: Year, Month, DayofMonth, "
                 "DayOfWeek, CRSDepTime, CRSArrTime, UniqueCarrier, FlightNum, ActualElapsedTime, Origin, Dest, "
                 "Distance, Diverted, ArrDelay)")
ELECTRICITY_NEEDS = ("electricity-normalized.csv (the normalised Elec2 of MOA/OpenML: date, day, period, nswprice, "
                     "nswdemand, vicprice, vicdemand, transfer, class)")
TEST_SHARE = 0.05  # of the records, per test set
_SEED = 20_210  # the test sets' draw: fixed, so that every run of every seed scores on the same rows


def find(data_dir: str | Path, names: tuple[str, ...], dataset: str, columns: tuple[str, ...]) -> Path:
    """The first of ``names`` in ``data_dir`` (or ``data_dir`` itself when it is a file); else one line naming the
    files and their columns."""
    base = Path(data_dir)
    if base.is_file():
        return base
    for name in names:
        if (base / name).is_file():
            return base / name
    raise DataFileError(f"{dataset}: none of {', '.join(names)} in {base}: data_dir= must hold the {dataset} "
                        f"records as comma-separated text with the columns {','.join(columns)} (a header line is "
                        "optional; nothing is downloaded)")


def rows(path: Path, columns: int, limit: int | None, dataset: str) -> Iterator[list[str]]:
    """The comma-separated records of ``path`` (an optional header and ARFF lines skipped), each checked to have
    ``columns`` fields, at most ``limit`` of them."""
    count = 0
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        for line_no, row in enumerate(csv.reader(f), 1):
            if not row or row[0].startswith(("@", "%")) or (count == 0 and not _number(row[-2 if len(row) > 1
                                                                                            else 0])):
                continue  # blank, ARFF declarations, or the header
            if len(row) != columns:
                raise DataFileError(f"{path}: line {line_no} has {len(row)} fields where {dataset} has {columns}; "
                                    "pass the original file")
            yield [v.strip().strip("'\"") for v in row]
            count += 1
            if limit is not None and count >= limit:
                return


def load_airline(data_dir: str | Path) -> ArrayDataset:
    path = find(data_dir, AIRLINE_FILES, "airline", AIRLINE_COLUMNS)
    table = list(rows(path, len(AIRLINE_COLUMNS), AIRLINE_RECORDS, "airline"))
    if len(table) < 100:
        raise DataFileError(f"{path}: {len(table)} records; the airline data has {AIRLINE_RECORDS:,} and more")
    features = [[r[j] for r in table] for j in range(len(AIRLINE_COLUMNS) - 1)]
    x = np.concatenate([_encode(col) for col in features], axis=1)
    delay = np.array([_float(r[-1], path) for r in table])
    return _with_tests("airline", x, (delay > 0).astype(np.int64))


def load_electricity(data_dir: str | Path) -> ArrayDataset:
    path = find(data_dir, ELECTRICITY_FILES, "electricity", ELECTRICITY_COLUMNS)
    table = list(rows(path, len(ELECTRICITY_COLUMNS), None, "electricity"))
    if len(table) < 100:
        raise DataFileError(f"{path}: {len(table)} records; the electricity data has 45,312")
    day = np.array([int(_float(r[1], path)) for r in table])
    if day.min() < 1 or day.max() > 7:
        raise DataFileError(f"{path}: the day column must hold the weekday 1..7, found {day.min()}..{day.max()}")
    numeric = np.array([[_float(v, path) for v in r[2:8]] for r in table], dtype=np.float32)
    x = np.concatenate([np.eye(7, dtype=np.float32)[day - 1], numeric], axis=1)
    labels = {r[-1].upper() for r in table}
    if not labels <= {"UP", "DOWN"}:
        raise DataFileError(f"{path}: the class column must be UP or DOWN, found {sorted(labels)[:3]}")
    y = np.array([r[-1].upper() == "UP" for r in table], dtype=np.int64)
    return _with_tests("electricity", x, y)


def _with_tests(name: str, x: np.ndarray, y: np.ndarray) -> ArrayDataset:
    """Two label-balanced test sets from the first and the last quarter of the stream; the rest trains."""
    n, rng = len(y), np.random.default_rng(_SEED)
    per_label = max(int(TEST_SHARE * n) // 2, 1)
    tests = []
    for part in (np.arange(0, n // 4), np.arange(n - n // 4, n)):
        for label in (0, 1):
            pool = part[y[part] == label]
            if len(pool) < per_label:
                raise DataFileError(f"{name}: too few records of label {label} at one end of the stream for a "
                                    "balanced test set; pass the original file")
            tests.append(np.sort(rng.choice(pool, per_label, replace=False)))
    test = np.concatenate(tests)
    train = np.setdiff1d(np.arange(n), test)
    shape = (-1, 1, 1, x.shape[1])
    x = x.astype(np.float32)
    return ArrayDataset(name, x[train].reshape(shape), y[train], x[test].reshape(shape), y[test], 2)


def _encode(column: list[str]) -> np.ndarray:
    """A numeric column min-max normalised to [0, 1] [n, 1]; any other one-hot over its sorted values [n, v]."""
    if all(_number(v) for v in column):
        v = np.array([float(s) for s in column], dtype=np.float64)
        span = v.max() - v.min()
        return ((v - v.min()) / (span if span > 0 else 1.0)).astype(np.float32)[:, None]
    values = sorted(set(column))
    index = {s: i for i, s in enumerate(values)}
    return np.eye(len(values), dtype=np.float32)[[index[s] for s in column]]


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _float(s: str, path: Path) -> float:
    try:
        return float(s)
    except ValueError:
        raise DataFileError(f"{path}: {s!r} is not a number where one is expected; pass the original file") from None
