"""The residual projection a shared tree's splits are chosen on (Sketch Boost's reduced gradient).

A shared tree fits every label at once, so its split gain is the sum over labels of each label's gain (GBDT-MO).
Scanning K residuals per cell would make every histogram K times wider; instead the residual vectors
D[t, s, :] (K values) are projected on the d directions in which the positions' residuals vary most, the top
principal directions of r[t, k] = sum_s D[t, s, k]. With d = K the projection is a rotation and the gain is
exactly the sum over labels; with d < K it keeps the part of the residuals a split can separate best. The leaf
values come from each label's own residuals afterwards (leaves.leaf_values).
"""
import numpy as np


def principal_directions(R: np.ndarray, d: int) -> np.ndarray:
    """W (K x d): the d orthonormal directions maximising the variance of R @ W over R's rows (the top
    eigenvectors of R's centred covariance, largest first), each signed so that its largest entry is positive.
    One column: W = [[1]], so a shared tree of one label is that label's tree."""
    K = R.shape[1]
    d = min(d, K)
    if K == 1:
        return np.ones((1, 1))
    mean = R.mean(axis=0) if len(R) else np.zeros(K)
    cov = R.T @ R - len(R) * np.outer(mean, mean)
    W = np.linalg.eigh(cov)[1][:, ::-1][:, :d].copy()
    for i in range(d):
        if W[np.argmax(np.abs(W[:, i])), i] < 0:
            W[:, i] = -W[:, i]
    return W
