"""What the cost suite's measured rows are read into (pure: rows in, tables, lists and lines out): per kernel
x VLEN x ISA build, HEAD against BASE, the Markdown, JSON and HTML reports (``suite_tables``) and a batch
sweep's paths side by side (``batch_paths``); several compilers' rows side by side (``compiler_gaps``); what
the runs measured of the cases they selected and the exit status (``run_tally``); the PR gate's cost lists
(``gate_lists``); a fix's cost in instructions, fixed / replaced / scalar twin (``fix_cost``), and its
estimated cycles per core with the estimates' track record (``fix_speed``: a series description's Speed
paragraph)."""
