"""Built-in schedules, one file each; ``pipesim.program.loader`` finds them by name (``--schedule 1f1b``)."""
