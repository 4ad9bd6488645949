"""Schedules in, a proven Program out: the IR, schedule loading, lowering, the column table and validation."""
