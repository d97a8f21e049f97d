"""fcircnn.constraints."""
