"""The run directory, the one seam between capture and analysis: its schema, writer and reader."""
