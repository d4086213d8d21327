"""A generated city-operations lake (107 files in 9 formats) with 20 analyst questions
and the data sources each needs, in KramaBench's workload shape. It shares nothing with the
KramaBench legal slice: it checks that retrieval is not tuned to those questions.

Questions were written with the lake, before any ranking was measured, and paraphrase
(\"fine particulate\" for pm25, \"passengers\" for boardings) as analysts do.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pandas as pd

__all__ = ["QUESTIONS", "build_lake"]

QUESTIONS: list[tuple[str, list[str]]] = [
    ("Which monitoring station recorded the highest average fine particulate level in 2024?",
     ["air_quality/stations/"]),
    ("How many passengers boarded route 12 in March 2023?",
     ["transit/boardings_2023.parquet"]),
    ("Which stops are not accessible to wheelchair users?", ["transit/gtfs_stops.csv"]),
    ("What share of its capital projects budget has the parks department spent?",
     ["finance/budget_2024.xlsx"]),
    ("What was the total amount paid to each vendor over 2024?", ["finance/invoices/"]),
    ("What is the average valuation of building permits issued in 2022 that failed their first"
     " inspection?", ["permits.sqlite"]),
    ("Which district has the most pupils enrolled in grade 5?", ["schools/enrollment.csv"]),
    ("Did mean math test scores improve between 2019 and 2023?",
     ["schools/test_scores.jsonl"]),
    ("In which week did flu-like cases peak at the clinics?", ["health/clinic_visits.csv"]),
    ("Is bus ridership lower on rainy days?",
     ["weather/daily_weather.csv", "transit/boardings_2023.parquet"]),
    ("Which tree species has the largest average trunk diameter in Riverside Park?",
     ["parks/trees_inventory.csv"]),
    ("How does the median rent compare with the population of each neighbourhood?",
     ["housing/rents_by_neighbourhood.csv", "housing/population_census.html"]),
    ("How long does it take on average to close a pothole complaint?",
     ["311/service_requests_2024.csv"]),
    ("Which municipal building used the most electricity in the winter months?",
     ["energy/buildings/"]),
    ("How many ETL job failures were logged in March 2024?", ["logs/"]),
    ("How are the air sensors calibrated, according to the methodology?",
     ["reports/methodology_air_sensors.md"]),
    ("Does nitrogen dioxide rise on days with little wind?",
     ["air_quality/stations/", "weather/daily_weather.csv"]),
    ("Which neighbourhood files the most noise complaints per 1,000 residents?",
     ["311/service_requests_2024.csv", "housing/population_census.html"]),
    ("What fuel do most vehicles of the city fleet use?", ["fleet/vehicles.csv"]),
    ("How much park area is there per resident in each neighbourhood?",
     ["parks/park_areas.json", "housing/population_census.html"]),
]  # fmt: skip

_HOODS = ["Riverside", "Old Town", "Northgate", "Harbour", "Hillcrest", "Eastfield", "Millbrook"]
_STATIONS = [
    f"{name}_{i}" for name in ("north", "south", "central", "port", "ring") for i in range(8)
]
_BUILDINGS = [
    "city_hall", "library_main", "pool_east", "depot_north", "museum", "arena", "school_a",
    "school_b", "fire_station_1", "fire_station_2", "police_hq", "archive", "theatre",
    "community_centre", "water_works",
]  # fmt: skip


def build_lake(root: Path, seed: int = 7) -> list[dict]:
    """Write the lake under `root` (created) and return the workload (id, query, data_sources)."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)

    def frame(rows: int, **columns) -> pd.DataFrame:
        return pd.DataFrame({k: [f(i) for i in range(rows)] for k, f in columns.items()})

    def csv(path: str, df: pd.DataFrame) -> None:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(target, index=False)

    day = pd.Timestamp("2024-01-01")
    for station in _STATIONS:
        csv(
            f"air_quality/stations/{station}.csv",
            frame(
                48,
                timestamp=lambda i: str(day + pd.Timedelta(hours=i)),
                pm25=lambda i: round(rnd.uniform(2, 40), 1),
                pm10=lambda i: round(rnd.uniform(5, 60), 1),
                no2=lambda i: round(rnd.uniform(5, 80), 1),
                o3=lambda i: round(rnd.uniform(10, 90), 1),
            ),
        )
    (root / "transit").mkdir(exist_ok=True)
    frame(
        200,
        route_id=lambda i: rnd.randint(1, 30),
        stop_id=lambda i: rnd.randint(1, 90),
        service_date=lambda i: str((pd.Timestamp("2023-01-01") + pd.Timedelta(days=i)).date()),
        boardings=lambda i: rnd.randint(0, 400),
    ).to_parquet(root / "transit/boardings_2023.parquet")
    routes = [
        {
            "route_id": r,
            "route_name": f"Line {r}",
            "mode": rnd.choice(["bus", "tram"]),
            "operator": {"name": "CityTransit", "contract": {"ends": 2027}},
        }
        for r in range(1, 31)
    ]
    (root / "transit/routes.json").write_text(json.dumps(routes))
    csv(
        "transit/gtfs_stops.csv",
        frame(
            90,
            stop_id=lambda i: i + 1,
            stop_name=lambda i: f"{rnd.choice(_HOODS)} stop {i}",
            stop_lat=lambda i: 52 + rnd.random(),
            stop_lon=lambda i: 4 + rnd.random(),
            wheelchair_boarding=lambda i: rnd.choice([0, 1, 2]),
        ),
    )
    (root / "finance").mkdir(exist_ok=True)
    with pd.ExcelWriter(root / "finance/budget_2024.xlsx") as xl:
        frame(
            8,
            department=lambda i: [
                "parks",
                "roads",
                "schools",
                "health",
                "transit",
                "housing",
                "culture",
                "safety",
            ][i],
            allocated_eur=lambda i: rnd.randint(10**6, 10**7),
        ).to_excel(xl, sheet_name="Departments", index=False)
        frame(
            20,
            project=lambda i: f"P-{i:03d}",
            department=lambda i: rnd.choice(["parks", "roads"]),
            allocated_eur=lambda i: rnd.randint(10**5, 10**6),
            spent_eur=lambda i: rnd.randint(0, 10**5),
        ).to_excel(xl, sheet_name="CapitalProjects", index=False)
    vendors = ["Acme Paving", "GreenLeaf", "Brightlight", "Nordic IT", "AquaPure"]
    for month in range(1, 13):
        csv(
            f"finance/invoices/invoices_2024-{month:02d}.csv",
            frame(
                25,
                invoice_id=lambda i, m=month: f"INV-{m:02d}-{i:03d}",
                vendor=lambda i: rnd.choice(vendors),
                amount_eur=lambda i: round(rnd.uniform(100, 50000), 2),
                department=lambda i: rnd.choice(["parks", "roads", "it"]),
                paid_date=lambda i, m=month: f"2024-{m:02d}-{rnd.randint(1, 28):02d}",
            ),
        )
    con = sqlite3.connect(root / "permits.sqlite")
    frame(
        60,
        permit_id=lambda i: i,
        address=lambda i: f"{i} {rnd.choice(_HOODS)} Road",
        issued=lambda i: f"{rnd.randint(2019, 2024)}-05-01",
        valuation_eur=lambda i: rnd.randint(10**4, 10**6),
        permit_type=lambda i: rnd.choice(["new build", "extension", "demolition"]),
    ).to_sql("building_permits", con, index=False)
    frame(
        90,
        permit_id=lambda i: rnd.randint(0, 59),
        inspection_date=lambda i: "2023-01-01",
        outcome=lambda i: rnd.choice(["pass", "fail"]),
    ).to_sql("inspections", con, index=False)
    con.close()
    csv(
        "schools/enrollment.csv",
        frame(
            80,
            school=lambda i: f"School {i % 20}",
            district=lambda i: rnd.choice(_HOODS),
            grade=lambda i: i % 8 + 1,
            students=lambda i: rnd.randint(20, 120),
        ),
    )
    (root / "schools/test_scores.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "school": f"School {i % 20}",
                    "subject": rnd.choice(["math", "reading", "science"]),
                    "year": 2019 + i % 5,
                    "mean_score": round(rnd.uniform(400, 600), 1),
                }
            )
            for i in range(100)
        )
    )
    csv(
        "health/clinic_visits.csv",
        frame(
            52,
            clinic=lambda i: rnd.choice(["North Clinic", "Harbour Clinic"]),
            iso_week=lambda i: i + 1,
            visits=lambda i: rnd.randint(100, 900),
            flu_like_cases=lambda i: rnd.randint(0, 120),
        ),
    )
    csv(
        "weather/daily_weather.csv",
        frame(
            365,
            date=lambda i: str((pd.Timestamp("2023-01-01") + pd.Timedelta(days=i)).date()),
            tmax_c=lambda i: round(rnd.uniform(-5, 32), 1),
            tmin_c=lambda i: round(rnd.uniform(-10, 20), 1),
            precipitation_mm=lambda i: round(max(0, rnd.gauss(1, 4)), 1),
            wind_kmh=lambda i: round(rnd.uniform(0, 60), 1),
        ),
    )
    csv(
        "parks/trees_inventory.csv",
        frame(
            150,
            tree_id=lambda i: i,
            species=lambda i: rnd.choice(["oak", "lime", "plane", "birch"]),
            diameter_cm=lambda i: rnd.randint(5, 150),
            park=lambda i: f"{rnd.choice(_HOODS)} Park",
            planted_year=lambda i: rnd.randint(1900, 2020),
        ),
    )
    parks = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {
                    "name": f"{h} Park",
                    "neighbourhood": h,
                    "area_ha": round(rnd.uniform(1, 40), 1),
                },
                "geometry": {"type": "Point", "coordinates": [4.5, 52.1]},
            }
            for h in _HOODS
        ],
    }
    (root / "parks/park_areas.json").write_text(json.dumps(parks))
    csv(
        "housing/rents_by_neighbourhood.csv",
        frame(
            35,
            neighbourhood=lambda i: _HOODS[i % 7],
            year=lambda i: 2019 + i // 7,
            median_rent_eur=lambda i: rnd.randint(700, 2200),
        ),
    )
    census = frame(
        7,
        neighbourhood=lambda i: _HOODS[i],
        population_2020=lambda i: rnd.randint(5000, 60000),
        households=lambda i: rnd.randint(2000, 30000),
    )
    (root / "housing/population_census.html").write_text(
        "<html><body><h1>Census 2020: residents by neighbourhood</h1>"
        + census.to_html(index=False)
        + "</body></html>"
    )
    csv(
        "311/service_requests_2024.csv",
        frame(
            300,
            request_id=lambda i: i,
            category=lambda i: rnd.choice(
                ["pothole", "noise", "graffiti", "streetlight out", "litter"]
            ),
            opened=lambda i: f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
            closed=lambda i: f"2024-12-{rnd.randint(1, 28):02d}",
            neighbourhood=lambda i: rnd.choice(_HOODS),
        ),
    )
    for building in _BUILDINGS:
        csv(
            f"energy/buildings/{building}.csv",
            frame(
                24,
                month=lambda i: f"{2023 + i // 12}-{i % 12 + 1:02d}",
                kwh=lambda i: rnd.randint(10**3, 10**5),
                gas_m3=lambda i: rnd.randint(0, 10**4),
            ),
        )
    (root / "logs").mkdir(exist_ok=True)
    for d in range(1, 21):
        lines = [
            f"2024-03-{d:02d}T0{h}:00:00 {rnd.choice(['INFO', 'INFO', 'ERROR'])} job"
            f" {rnd.choice(['load_sensors', 'sync_invoices'])} finished"
            for h in range(6)
        ]
        (root / f"logs/etl-2024-03-{d:02d}.log").write_text("\n".join(lines) + "\n")
    (root / "reports").mkdir(exist_ok=True)
    (root / "reports/methodology_air_sensors.md").write_text(
        "# Air sensor methodology\n## Calibration\nLow-cost sensors are co-located with the"
        " reference monitor for two weeks and corrected by linear regression.\n## Data gaps\n"
    )
    (root / "reports/annual_report_2023.md").write_text(
        "# Annual report 2023\n## Transit\nRidership recovered.\n## Budget\nSpending rose.\n"
    )
    csv(
        "fleet/vehicles.csv",
        frame(
            40,
            vehicle_id=lambda i: f"V{i:03d}",
            vehicle_type=lambda i: rnd.choice(["van", "truck", "car"]),
            fuel=lambda i: rnd.choice(["diesel", "electric", "petrol"]),
            odometer_km=lambda i: rnd.randint(0, 3 * 10**5),
        ),
    )
    # distractors: plausible files that no question needs
    csv(
        "admin/staff_directory.csv",
        frame(
            30,
            name=lambda i: f"Person {i}",
            department=lambda i: rnd.choice(["parks", "it", "finance"]),
            phone=lambda i: f"+31 20 {rnd.randint(10**6, 10**7)}",
        ),
    )
    csv(
        "admin/vendor_contacts.csv",
        frame(5, vendor=lambda i: vendors[i], email=lambda i: f"ap@{i}.example"),
    )
    csv(
        "streets/street_lights.csv",
        frame(
            60,
            light_id=lambda i: i,
            street=lambda i: f"{rnd.choice(_HOODS)} Street",
            lamp=lambda i: "LED",
        ),
    )
    return [
        {"id": f"city-{i + 1}", "query": q, "data_sources": s} for i, (q, s) in enumerate(QUESTIONS)
    ]
