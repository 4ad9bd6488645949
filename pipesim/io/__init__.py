"""Every file format, read and written safely: timelines, PyTorch action CSVs, spec files, atomic writes."""
