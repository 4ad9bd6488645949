"""Pictures only: Gantt charts, the terminal timeline, sweep plots and the shared figure style."""
