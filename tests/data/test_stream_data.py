"""The FedRC paper's Table 3 data read from the user's own files, on small files written here: Airline's first
58,100 records and 13 features (categorical ones one-hot, the others min-max normalised), Electricity's 13 features
(weekday one-hot and six numbers), two label-balanced test sets from the stream's two ends, the stream-drift
scenario's two test clients, and one line (exit 2) naming the file when it is missing or malformed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedcluster.app.cli import main
from fedcluster.config.run_config import load_raw, resolve
from fedcluster.data.sources.streams import AIRLINE_RECORDS, TEST_SHARE, load_airline, load_electricity
from fedcluster.engine.runner import Run
from fedcluster.errors import ConfigError, DataFileError

CARRIERS, ORIGINS, DESTS = ("AA", "PS", "UA"), ("LAX", "SFO"), ("JFK", "ORD", "SEA")


def write_airline(folder: Path, records: int, header: bool = True) -> Path:
    """``records`` flight records; those past the first 58,100 fly a carrier ("ZZ") found nowhere before."""
    rng = np.random.default_rng(0)
    lines = ["Year,Month,DayofMonth,DayOfWeek,CRSDepTime,CRSArrTime,UniqueCarrier,FlightNum,ActualElapsedTime,"
             "Origin,Dest,Distance,Diverted,ArrDelay"] if header else []
    for i in range(records):
        carrier = "ZZ" if i >= AIRLINE_RECORDS else CARRIERS[i % 3]
        lines.append(f"1987,10,{1 + i % 28},{1 + i % 7},{rng.integers(0, 2400)},{rng.integers(0, 2400)},{carrier},"
                     f"{rng.integers(1, 2000)},{rng.integers(30, 300)},{ORIGINS[i % 2]},{DESTS[i % 3]},"
                     f"{rng.integers(100, 3000)},0,{rng.integers(-20, 40)}")
    path = folder / "airline_14col.data"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_electricity(folder: Path, records: int, arff: bool = False) -> Path:
    rng = np.random.default_rng(1)
    head = ["@relation elec", "@attribute date numeric", "@data"] if arff else \
        ["date,day,period,nswprice,nswdemand,vicprice,vicdemand,transfer,class"]
    rows = [f"0.{i},{1 + i // 48 % 7},{(i % 48) / 47:.6f},{rng.random():.6f},{rng.random():.6f},{rng.random():.6f},"
            f"{rng.random():.6f},{rng.random():.6f},{'UP' if rng.random() < 0.4 else 'DOWN'}" for i in range(records)]
    path = folder / "electricity-normalized.csv"
    path.write_text("\n".join(head + rows) + "\n")
    return path


def test_airline_reads_the_first_58100_records_with_the_preprocessing(tmp_path: Path) -> None:
    write_airline(tmp_path, AIRLINE_RECORDS + 40)
    ds = load_airline(tmp_path)
    assert len(ds.y_train) + len(ds.y_test) == AIRLINE_RECORDS  # "the initial 58100 data points"
    # 10 numeric features + one-hot carrier (3: no "ZZ" from past the cut), origin (2) and destination (3)
    assert ds.input_shape == (1, 1, 10 + 3 + 2 + 3) and ds.num_classes == 2
    x = np.concatenate([ds.x_train, ds.x_test]).reshape(-1, 18)
    assert x.min() == 0.0 and x.max() == 1.0
    # in the columns' order: carrier one-hot after the six times, origin and destination after FlightNum, elapsed
    for one_hot in (x[:, 6:9], x[:, 11:13], x[:, 13:16]):
        assert np.all(one_hot.sum(1) == 1) and set(np.unique(one_hot)) == {0.0, 1.0}


def test_airline_label_is_a_delay_and_the_test_sets_come_from_the_two_ends(tmp_path: Path) -> None:
    path = write_airline(tmp_path, 4000, header=False)  # a header is optional
    delays = np.array([int(line.rsplit(",", 1)[1]) for line in path.read_text().splitlines()])
    ds = load_airline(path)
    n, per = 4000, int(TEST_SHARE * 4000) // 2
    assert len(ds.y_test) == 4 * per and len(ds.y_train) == n - 4 * per
    half = len(ds.y_test) // 2
    for part in (ds.y_test[:half], ds.y_test[half:]):  # each test set label-balanced
        assert (part == 1).sum() == (part == 0).sum() == per
    # the test rows are the stream's first and last quarter: their day of month (feature 2) follows i % 28
    day = np.rint(ds.x_test.reshape(len(ds.y_test), -1)[:, 2] * 27).astype(int)
    all_days = np.arange(n) % 28
    assert set(day[:half]) <= set(all_days[: n // 4]) and set(day[half:]) <= set(all_days[-(n // 4):])
    assert ((delays > 0).mean() - 0.5) ** 2 < 0.1 and set(np.unique(ds.y_train)) == {0, 1}


@pytest.mark.parametrize("arff", [False, True])
def test_electricity_has_13_features_and_the_up_label(tmp_path: Path, arff: bool) -> None:
    path = write_electricity(tmp_path, 3000, arff)
    ds = load_electricity(tmp_path)
    assert ds.input_shape == (1, 1, 13) and len(ds.y_train) + len(ds.y_test) == 3000
    x = np.concatenate([ds.x_train, ds.x_test]).reshape(-1, 13)
    assert np.all(x[:, :7].sum(1) == 1)  # the weekday, one-hot
    ups = sum(line.endswith(",UP") for line in path.read_text().splitlines())
    assert int(np.concatenate([ds.y_train, ds.y_test]).sum()) == ups


def test_missing_or_malformed_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="airline_14col.data") as e:
        load_airline(tmp_path)
    assert len(str(e.value).splitlines()) == 1
    (tmp_path / "electricity-normalized.csv").write_text("date,day\n0.1,3\n")
    with pytest.raises(DataFileError, match="line 2 has 2 fields where electricity has 9"):
        load_electricity(tmp_path)


def test_stream_drift_gives_two_test_clients_and_needs_a_stream(tmp_path: Path) -> None:
    write_electricity(tmp_path, 3000)
    over = ["dataset=electricity", f"data_dir={tmp_path}", "scenario=stream-drift", "num_clients=10", "rounds=1",
            "progress=false", "threads=1", f"out={tmp_path / 'run'}"]
    run = Run(*resolve(load_raw(None, over)))
    try:
        fed = run.fed
        assert fed.test.num_clients == 2 and list(fed.test_cluster) == [0, 1]
        assert np.diff(fed.test.ptr).tolist() == [len(fed.test.y) // 2] * 2
        assert fed.num_clients == 10
    finally:
        run.dir.release()
    with pytest.raises(ConfigError, match="needs dataset=airline or dataset=electricity"):
        Run(*resolve(load_raw(None, ["dataset=digits", "scenario=stream-drift", f"out={tmp_path / 'r2'}"])))


def test_table3_runs_on_the_users_files(tmp_path: Path) -> None:
    write_airline(tmp_path, 3000)
    out = tmp_path / "reproduction"
    assert main(["reproduce", "s4-table3-airline", "--budget", "tiny", "--seeds", "1", "--out", str(out),
                 "--set", f"data_dir={tmp_path}", "--set", "threads=1"]) == 0
    assert "FedRC outperforms" in (out / "s4-table3-airline.md").read_text()
