"""The ``pipesim`` command line: the one home of every command and argument check."""
