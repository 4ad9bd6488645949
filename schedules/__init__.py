"""Built-in schedules, one file each; ``pipesim.loader`` finds them by name (``--schedule 1f1b``)."""
