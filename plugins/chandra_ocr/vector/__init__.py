"""The vector feed's consumer: embed outbox chunks, keep them in an embedded index, search it."""
