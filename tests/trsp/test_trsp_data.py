"""Readers (shipped commutes, the authors' format, trip/stop CSVs), their errors, and the module end to end."""

import numpy as np
import pytest

from zoo.cli import main
from zoo.core.data import DataError
from zoo.methods.trsp.datamodule import TrSPDataModule
from zoo.methods.trsp.instances import authors_instance, commuting_od_instance, csv_instance


def test_commuting_od_instance_is_real_and_seeded():
    a = commuting_od_instance("autauga", n_travellers=30, seed=4)
    b = commuting_od_instance("autauga", n_travellers=30, seed=4)
    assert (a.n, a.m) == (30, 12) and np.array_equal(a.trips, b.trips)
    assert a.info["fips"] == "01001" and len(a.names[0]) == 11
    assert (a.direct > 0).all() and np.allclose(np.diag(a.shuttle), 0)
    sub = commuting_od_instance("manhattan", n_travellers=10, n_candidates=50, seed=1)
    assert sub.m == 50


def test_authors_candidate_design_draws_stops_from_the_point_pool():
    """candidates="pool": m stops drawn from the pool's endpoints (some travellers then stand on a stop, which the
    tract centroids never allowed); "endpoints": every stop is one of the travellers' own endpoints."""
    pool = commuting_od_instance("autauga", n_travellers=30, n_candidates=100, seed=2, candidates="pool", pool_size=200)
    again = commuting_od_instance(
        "autauga", n_travellers=30, n_candidates=100, seed=2, candidates="pool", pool_size=200
    )
    assert (pool.n, pool.m) == (30, 100) and np.array_equal(pool.stops, again.stops)
    assert len(set(pool.names)) == 100 and all(nm[0] in "od" for nm in pool.names)
    ends = np.concatenate([pool.trips[:, :2], pool.trips[:, 2:]])
    on_stop = (np.abs(ends[:, None, :] - pool.stops[None]).max(-1) < 1e-12).any(1)
    assert 0 < on_stop.sum() < 60  # a few of the 60 endpoints are among the 100 of 400 pool points drawn
    own = commuting_od_instance(
        "autauga", n_travellers=30, n_candidates=40, seed=2, candidates="endpoints", pool_size=200
    )
    ends = np.concatenate([own.trips[:, :2], own.trips[:, 2:]])
    assert (np.abs(own.stops[:, None, :] - ends[None]).max(-1) < 1e-12).any(1).all()
    assert np.isclose(np.minimum(own.walk_a.min(1), own.walk_b.min(1)), 0).sum() >= 20
    dm = TrSPDataModule(
        county="autauga", n_travellers=30, n_candidates=40, seed=2, candidates="endpoints", pool_size=200
    )
    dm.setup()
    assert np.array_equal(dm.instance.stops, own.stops)
    with pytest.raises(ValueError, match="pool_size"):
        commuting_od_instance("autauga", n_travellers=30, candidates="pool", pool_size=10)
    with pytest.raises(ValueError, match="candidates"):
        commuting_od_instance("autauga", candidates="centroids")


def write_authors(folder, walk, car, routes="pickup_point_id,dropoff_point_id\n0,2\n1,3\n2,0\n"):
    folder.mkdir(exist_ok=True)
    np.savez(folder / "matrix_pedestrian_sec.npz", walk)
    np.savez(folder / "matrix_auto_sec.npz", car)
    (folder / "agents_routes.csv").write_text(routes)


def line_seconds(n=4):
    x = np.arange(n) * 600.0
    return np.abs(x[:, None] - x[None])


def test_authors_format_loads_in_hours(tmp_path):
    W = line_seconds()
    write_authors(tmp_path / "d", W, W / 4)
    inst = authors_instance(str(tmp_path / "d"), transit_scaling=0.5, candidate_mode=1)
    assert (inst.n, inst.m) == (3, 4) and inst.metric
    assert inst.direct.tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3])  # 1,200 s
    assert inst.shuttle[0, 3] == pytest.approx(0.5 * 1800 / 4 / 3600)
    assert authors_instance(str(tmp_path / "d"), candidate_mode=0).m == 4  # endpoints 0..3 all used


def test_authors_format_errors_name_file_line_column(tmp_path):
    W = line_seconds()
    write_authors(tmp_path / "bad", W, W, "pickup_point_id,dropoff_point_id\n0,2\n1,9\n")
    with pytest.raises(DataError, match=r"agents_routes\.csv:3: column 'dropoff_point_id': '9' is not in \[0, 3\]"):
        authors_instance(str(tmp_path / "bad"))
    V = W.copy()
    V[0, 3] = V[3, 0] = 5000.0  # 0 -> 3 longer than 0 -> 1 -> 3
    write_authors(tmp_path / "nm", V, W)
    with pytest.raises(
        DataError, match=r"matrix_pedestrian_sec\.npz: triangle inequality broken .* \(i=0, j=\d, k=3\)"
    ):
        authors_instance(str(tmp_path / "nm"))
    assert not authors_instance(str(tmp_path / "nm"), allow_non_metric=True).metric


def test_csv_errors_name_file_line_column(tmp_path):
    trips, stops = tmp_path / "trips.csv", tmp_path / "stops.csv"
    trips.write_text("a_lon,a_lat,b_lon,b_lat\n-73.99,40.75,-73.95,40.78\n-73.99,91,-73.95,40.78\n")
    stops.write_text("lon,lat\n-73.98,40.76\n-73.96,40.77\n")
    with pytest.raises(DataError, match=r"trips\.csv:3: column 'a_lat': '91' is not in \[-90, 90\]"):
        csv_instance(str(trips), str(stops))
    trips.write_text("a_lon,a_lat,b_lon,b_lat\n-73.99,40.75,-73.95,40.78\n")
    stops.write_text("lon,latitude\n-73.98,40.76\n")
    with pytest.raises(DataError, match=r"stops\.csv.*lat"):
        csv_instance(str(trips), str(stops))
    with pytest.raises(DataError, match="data.path and data.stops_path"):
        TrSPDataModule(format="csv", path=str(trips)).setup()


def test_train_then_predict_routes(tmp_path, capsys):
    assert (
        main(["train", "recipe=trsp-gc.yaml", "overlay=tiny/trsp-gc.yaml", f"out_dir={tmp_path}", "export.formats=[]"])
        == 0
    )
    run = next(tmp_path.glob("*/version_0"))
    assert (run / "trsp" / "audit.json").is_file() and (run / "trsp" / "map.png").is_file()
    trips = tmp_path / "trips.csv"
    trips.write_text("a_lon,a_lat,b_lon,b_lat\n-86.50,32.45,-86.47,32.60\n-86.50,32.45,-86.501,32.451\n")
    capsys.readouterr()
    assert main(["predict", str(run), str(trips)]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x and x[0].isdigit()]
    assert len(lines) == 2
    walk, best = (float(v) for v in lines[1].split("\t")[1:3])
    assert lines[1].endswith("walk") and walk == best  # a 130 m trip is walked
    walk, best = (float(v) for v in lines[0].split("\t")[1:3])
    assert best <= walk and ("stop" in lines[0]) == (best < walk)
    # a fit that opened no stop (the tiny Autauga run does) routes every trip on foot instead of failing
    from zoo.core.loading import load_module

    module, _ = load_module(str(run))
    module.stops, module.stop_lonlat = module.stops[:0], module.stop_lonlat[:0]
    text = module.predict_cli([str(trips)])
    assert text.startswith("# ") and all(x.endswith("walk") for x in text.splitlines() if x[:1].isdigit())
