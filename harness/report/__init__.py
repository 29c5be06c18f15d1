"""What a run leaves behind: test ids and replay commands, failure reports, the replay of a recorded
call, standalone C reproducers, the summary matrix."""
