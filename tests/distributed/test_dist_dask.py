"""dask.distributed: a LocalCluster of 2 worker processes running a session made on the
client, through dask.array.map_blocks and dask.dataframe.map_partitions."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from dist_helpers import block_fn, inputs, loads_here, partition_fn, run_block, session  # noqa: E402


def same_rows(got, expected):
    """Blocks of 32 rows against one run of all 256: on a CPU with AMX-BF16 the 256-row
    products run on the tiles and the 32-row ones on the FMA kernel, which round differently
    (docs/compatibility.md), so the rows agree to float32 rounding, not to the bit."""
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=50)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def sess():
    return session(threads=1)


@pytest.fixture(scope="module")
def data():
    return np.concatenate(inputs(8, rows=32))


def test_map_blocks(client, sess, data):
    x = da.from_array(data, chunks=(32, 64))
    y = x.map_blocks(block_fn, sess=sess, dtype=np.float32, chunks=(32, 10))
    got = y.compute()
    same_rows(got, run_block(sess, data))
    loads = client.run(loads_here)
    assert len(loads) == 2 and all(n <= 1 for _, n in loads.values()), loads
    assert sum(n for _, n in loads.values()) >= 1  # the session really travelled


def test_map_partitions(client, sess, data):
    df = pd.DataFrame(data, columns=[f"x{i}" for i in range(64)])
    ddf = dd.from_pandas(df, npartitions=4)
    meta = pd.DataFrame({f"y{i}": pd.Series(dtype=np.float32) for i in range(10)})
    got = ddf.map_partitions(partition_fn, sess, meta=meta).compute()
    same_rows(got.to_numpy(), run_block(sess, data))
    assert list(got.index) == list(df.index)


def test_scattered_session_and_futures(client, sess, data):
    [remote] = client.scatter([sess], broadcast=True)
    blocks = np.split(data, 8)
    futs = client.map(block_fn, blocks, sess=remote)
    got = np.concatenate(client.gather(futs))
    same_rows(got, run_block(sess, data))
