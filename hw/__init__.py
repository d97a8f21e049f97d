"""fcircnn.hw."""
