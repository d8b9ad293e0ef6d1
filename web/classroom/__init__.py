"""The class in one room: a live session that students join from their phones.

    store.py   where sessions, polls and answers live: SQLite (default, embedded) or Redis
    codes.py   join codes, teacher secrets and student ids
    polls.py   the poll kinds (the predict-then-reveal questions) and the model's answer to each
    views.py   the blueprint: /class/...

The pages stay stateless: a session is shared state in the store, which every worker process
(and, with Redis, every app instance) sees. Students follow the teacher by short polls with
ETags (docs/classroom.md says why not Server-Sent Events).
"""
