"""The TreeCRF engine: plain numpy arrays in, plain numpy arrays out; nothing here imports spaCy.

Data flows one way through its modules (docs/architecture.md has the whole map):
- trees.py: what a tree is (Tree, Forest) and the named tuples the kernels exchange;
- sparse.py: binary feature rows (CSR) and their inverted index; numeric.py: numeric columns' bins and tests;
- crf.py, losses.py: forward-backward, Viterbi and the functional gradients the trees are fitted to; chunks.py:
  forward-backward and Viterbi over a batch in threads;
- the tree learner: histogram.py (a node's sums and feature histogram), split.py (split search),
  partition.py (a node's positions split by its test), grow.py (the one best-first grower, on one thread, or on
  two over two shards of the positions), leaves.py (leaf values and moving cached potentials by a tree's
  leaves), moves.py (those moves, sorted and applied), project.py (a shared tree's residual directions);
  missing.py holds the missing-value routing rule they share and the row transformations of the other
  strategies;
- prediction: predict_walk.py (one position, one tree: training-time evaluation and rows with missing values),
  predict_partition.py (large batches), predict_bitmask.py (small batches); intrinsics.py (prefetch, bit scan,
  the atomics and CPU yield of the two-thread grower);
- settings.py: the boosting settings (BoostParams); ensemble.py: the Ensemble of trees, the moves a round makes
  and the dev-set cache; booster.py: the boosting loop (Trainer), with shared_fit.py's shared-tree round;
- transitions.py (which label may follow which), rules.py (an ensemble's strongest paths, readable);
- serialize.py: the one place where model state becomes msgpack bytes and back;
- cluster.py: rounds on a Dask cluster (the optional extra), its shards growing each tree among themselves over
  peers.py's links, with wire.py's flat messages;
- memory.py: what a fit will ask of memory, checked before label-sized arrays are made;
- kernel_cache.py: where numba keeps the compiled kernels (an install's own, also where it is read-only).
User-facing messages come from the package's Errors catalogue (errors.py, which imports nothing).
"""
from . import kernel_cache

kernel_cache.install()  # before any kernel of the package is defined
KERNEL_CACHE_PERSISTS = kernel_cache.persists()  # False when compiled kernels live only as long as this process
in_kernel_cache = kernel_cache.in_kernel_cache
