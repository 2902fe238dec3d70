"""Transactional messages (B9): half messages, END_TRANSACTION, op records and the state checker."""
