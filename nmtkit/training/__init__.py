"""Training, one job a module: `loop` (the run: budgets, stop signals, the loop and `train`), `step` (one update:
optimizer, loss scaler, clipping, skipped non-finite updates, out-of-memory retry), `state` (progress, checkpoints,
resume, fine-tuning's start), `validation` (dev loss and BLEU, the best model, kept checkpoints), `setup` (the data
and the model a run trains), `mix` (what an epoch draws from multilingual data's pairs), `config` (train's complete
config), `command` (train's one library call), `amp`, `objectives`, `schedule`, `late_dropout`, `finetune` and
`run_log`."""
