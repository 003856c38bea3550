"""The shared commuting-od reader: shipped counties load, bad cells are named by file, line and column."""

import pytest

from zoo.core.data import DataError
from zoo.data.commuting_od import COUNTIES, county_fips, load_county, read_flows, read_regions


@pytest.mark.parametrize("county,tracts,pairs,total", [("autauga", 12, 138, 4735), ("sf", 196, 25724, 283138)])
def test_shipped_counties_match_source_md(county, tracts, pairs, total):
    regions, flows = load_county(county)
    assert len(regions.geoid) == tracts and regions.lonlat.shape == (tracts, 2)
    assert regions.features.shape[0] == tracts and regions.features.shape[1] == 131
    assert len(flows.commuters) == pairs and int(flows.commuters.sum()) == total
    assert flows.origin.max() < tracts and flows.destination.min() >= 0


def test_county_names():
    assert county_fips("Manhattan") == "36061" and county_fips("48453") in COUNTIES
    with pytest.raises(ValueError, match="unknown county"):
        county_fips("paris")


def test_bad_cells_name_file_line_and_column(tmp_path):
    regions_csv = tmp_path / "r.csv"
    regions_csv.write_text(
        "geoid,tract_name,centroid_lon,centroid_lat,aland_m2,awater_m2,demo_x\n"
        "1,a,-86.5,32.4,10,0,3\n2,b,-86.4,32.5,10,0,\n"
    )
    regions = read_regions(regions_csv)
    assert regions.features.shape == (2, 1) and regions.features[1, 0] != regions.features[1, 0]  # NaN kept
    bad = tmp_path / "bad.csv"
    bad.write_text("geoid,tract_name,centroid_lon,centroid_lat,aland_m2,awater_m2\n1,a,-86.5,95,10,0\n")
    with pytest.raises(DataError, match=r"bad.csv:2: column 'centroid_lat': 95.0 is outside"):
        read_regions(bad)
    od = tmp_path / "od.csv"
    od.write_text("origin_geoid,destination_geoid,commuters,distance_m\n1,2,3,10\n1,9,1,5\n")
    with pytest.raises(DataError, match=r"od.csv:3: column 'destination_geoid': tract '9'"):
        read_flows(od, regions)
    od.write_text("origin_geoid,destination_geoid,commuters,distance_m\n1,2,2.5,10\n")
    with pytest.raises(DataError, match=r"od.csv:2: column 'commuters': 2.5 is not a whole number"):
        read_flows(od, regions)
