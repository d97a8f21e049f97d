"""fcircnn.gen."""
