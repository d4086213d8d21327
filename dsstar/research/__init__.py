"""Reports as answers (DS-STAR+): an open question broken into factoid sub-questions, each
answered by a DS-STAR run, and a report written from their answers, citing each by number,
then reviewed and refined. Free of Prefect: `flows/report.py` runs it.

    subs        sub-questions and their answers (`SubQuestion`, `SubAnswer`), duplicates out
    loop        the method: decompose, answer, write, then review and refine (`research`)
    citations   the [N] of a report: which resolve, which answers are cited, numbers checked
    document    a model's markdown rebuilt as safe markdown and HTML (no link, image or HTML
                of its own)
    assemble    the report as stored and shown: body, charts and tables of the sub-runs,
                references, what is missing (`build_report`)
    estimate    what a report may cost before it runs (`dsstar report --estimate`)
    figures     a report's cited figures, and how they changed since an earlier report
"""
