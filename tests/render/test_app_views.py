"""The app's view helpers (ctxkeep/render/app_views.py) on their own."""

from __future__ import annotations

from ctxkeep.render.app_views import project_labels


def test_project_labels_show_the_readable_end_of_each_path_and_stay_unique():
    paths = [
        "/home/alice/work/acme/api",
        "/home/alice/work/other/api",  # same last part: "…/acme/api" and "…/other/api"
        "/srv/x/clients/acme/web/app",
        "/srv/y/clients/acme/web/app",  # same last three parts: one more each
        "/tmp",  # shorter than the tail: shown whole
        "C:\\Users\\bob\\src\\tool",  # Windows separators
        None,
        "",
    ]
    got = project_labels(paths)
    assert got["/home/alice/work/acme/api"] == "…/acme/api"
    assert got["/home/alice/work/other/api"] == "…/other/api"
    assert got["/srv/x/clients/acme/web/app"] == "…/x/clients/acme/web/app"
    assert got["/srv/y/clients/acme/web/app"] == "…/y/clients/acme/web/app"
    assert got["/tmp"] == "/tmp"
    assert got["C:\\Users\\bob\\src\\tool"] == "…/src/tool"
    assert got[None] == "(none)" and "" not in got
    labels = [v for k, v in got.items() if k]
    assert len(labels) == len(set(labels))  # one label, one project
    # the start of a long path no longer decides what is shown (it was right(path, 48))
    long = "/home/someone/" + "deep/" * 20 + "project-with-a-long-name"
    assert project_labels([long])[long] == "…/deep/project-with-a-long-name"
