"""fcircnn.sim."""
