"""A REINFORCE policy-gradient loop the way pytorch/examples' reinforcement_learning/reinforce.py
does it (https://github.com/pytorch/examples/blob/main/reinforcement_learning/reinforce.py):
each step of an episode samples an action from the policy's `Categorical`, keeps its
`log_prob`, and hands `action.item()` to the environment; at the episode's end the discounted
returns weight the log-probs, one backward and one optimizer step, then `torch_xla.sync()`.
Our own words, with a small corridor environment on the host instead of gym.

What is true (bare runtime): 4 episodes of 8 steps, a sync per episode; 96 reads
(aten::_local_scalar_dense), 100 executions, 19 compiles. Three lines read per step:
`Categorical(probs)` validates its parameters and `m.log_prob(action)` its sample, each with
`.all()` read on the host inside torch.distributions (validate_args=False removes both: 32
reads and 10 compiles, measured), and `action.item()` hands the action to the environment.
Nothing syncs inside the episode, so each read runs everything traced since the episode
began: the policy's forward for every step so far and the random sampling, whose RNG state
is itself a device value each sample advances. Each step index is a new, larger graph,
compiled in the first episode and reused by the later ones: the loop at `for _t in
range(STEPS)` traced 8 times over. It is no data-dependent branch and scan cannot run it (the
action must reach the host): the fix is a sync per iteration, so each step is the same small
graph."""

import torch
import torch_xla
from torch import nn
from torch.distributions import Categorical

EPISODES, STEPS, GAMMA = 4, 8, 0.99


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, state):
        return torch.softmax(self.body(state), dim=-1)


class Corridor:
    """Walk left or right; reward for moving right."""

    def reset(self) -> torch.Tensor:
        self.position = 0
        return self.observe()

    def observe(self) -> torch.Tensor:
        return torch.tensor([self.position, self.position**2, 1.0, -1.0]) / 10

    def step(self, action: int) -> tuple[torch.Tensor, float]:
        self.position += 1 if action == 1 else -1
        return self.observe(), float(action == 1)


def select_action(policy, state, device, log_probs):
    probs = policy(state.unsqueeze(0).to(device))
    m = Categorical(probs)  # expect: host_sync
    action = m.sample()
    log_probs.append(m.log_prob(action))  # expect: host_sync
    return action.item()  # expect: host_sync


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    policy = Policy().to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    env = Corridor()
    for _episode in range(EPISODES):
        state, log_probs, rewards = env.reset(), [], []
        for _t in range(STEPS):  # expect: unrolled_loop
            action = select_action(policy, state, device, log_probs)
            state, reward = env.step(action)
            rewards.append(reward)
        returns, running = [], 0.0
        for reward in reversed(rewards):
            running = reward + GAMMA * running
            returns.insert(0, running)
        returns_t = torch.tensor(returns, device=device)
        loss = -(torch.cat(log_probs) * returns_t).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_xla.sync()


if __name__ == "__main__":
    main()
