/**
 * The built-in training text of the tiny byte-level BPE. Written for this project: chat roles,
 * plain English about agents that work together, a little Python, and numbers, so the learned
 * merges cover what toy tasks and tests print.
 */
export const TINY_BPE_CORPUS = `system
user
assistant
You are a helpful assistant. Answer the question of the user in one short sentence.
The user asks a question and the assistant gives an answer. The answer should be short and clear.
Two agents work together on the same task. The first agent writes a summary of the text, and the
second agent writes a longer version of the same summary. Each agent reads the task, thinks about
what the other agent will say, and then gives its own response. The reward is higher when the two
responses fit together well and when each one follows the instructions of the task.

We train the agents with reinforcement learning. For every prompt, each agent samples several
responses; the reward of every joint response is computed, and the advantage of a response is its
reward minus the mean reward of its group. The policy of each agent is then updated so that good
responses become more likely and bad responses become less likely. After many steps the agents
learn to cooperate: they split the work, they do not repeat each other, and they finish the task.

def add(a, b):
    """Return the sum of two numbers."""
    return a + b

def is_even(number):
    return number % 2 == 0

def count_words(text):
    words = text.split()
    return len(words)

class Counter:
    def __init__(self):
        self.value = 0

    def step(self):
        self.value += 1
        return self.value

for i in range(10):
    if is_even(i):
        print(i, "is even")
    else:
        print(i, "is odd")

The house is built from blocks. Each block has a position x, y and z, and a colour such as red,
blue, green or white. The first agent places the walls, the second agent places the roof, and the
house is complete when every block of the plan is in the right place.

It's a small model, but it's enough for the tests. They're short, we've checked them, and we'll
keep them fast. I'm sure you'd agree that the results don't change from run to run.

Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 25 42 100 256 1024 2025 3.14 0.5 -1 +7 = 49.
Questions: what, where, when, why, who, which, how? Answers: yes, no, maybe, sometimes, always.
The quick brown fox jumps over the lazy dog. The dog was not amused, but the fox was happy.
Please think step by step, then write the final answer after the word "Answer:".
<think>
The user wants a short answer. I should think first and then answer.
</think>

Answer: the two agents should share the work so that each one does a different part of it.
`;
