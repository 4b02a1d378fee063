"""torchdata's StatefulDataLoader saves and loads the sampler's state by itself, workers or not."""

from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import ResumableDistributedSampler

data = list(range(23))


def make_loader() -> StatefulDataLoader:
    sampler = ResumableDistributedSampler(data, num_replicas=2, rank=1, seed=4)  # rank 1 of 2
    sampler.set_epoch(2)
    return StatefulDataLoader(data, batch_size=3, sampler=sampler, num_workers=2)


loader = make_loader()
it = iter(loader)
print("before:", [next(it).tolist() for _ in range(2)])
checkpoint = loader.state_dict()  # our sampler's state_dict() is inside, as of batch 2
del it

resumed = make_loader()  # a new process would build it the same way
resumed.load_state_dict(checkpoint)
print("after: ", [batch.tolist() for batch in resumed])
print("whole: ", [batch.tolist() for batch in make_loader()])
