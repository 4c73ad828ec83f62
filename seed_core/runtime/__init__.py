"""What every process of seed runs on: file I/O with atomic writes (``io``), logging (``logs``), stage
timing (``timing``), a rank that ends with its launcher (``parent_watch``) and the endpoints and secrets
read from the environment (``endpoints``). No module here is re-exported: import them by full name.
"""
