/**
 * The LLM Dec-POMDP interface (CoLLM paper §2): n agents, each sees its own observation o_{i,t}
 * (a prompt), emits an action a_{i,t} (a completion); the environment returns one joint reward
 * and the next state. States are immutable values so a rollout tree can branch from any node.
 */

/** Global information m_t available to critics (the paper's critic prompt). */
export interface GlobalInfo {
  /** 0-based index of the current turn. */
  turn: number;
  /** Horizon H (number of turns). */
  numTurns: number;
  /** Reward of the previous turn, or null at turn 0. */
  lastReward: number | null;
  /** Largest attainable reward per turn, for scaling (null if unknown). */
  maxReward: number | null;
  /**
   * Optional task progress for the critic's m_t (the paper's §5.2 global information), e.g.
   * `hits 2; slot 0`; rendered after the reward. Absent: m_t is turn and reward only.
   */
  progress?: string | null;
}

/**
 * Numeric global information m_t (the CoLLM paper's §4.1: m_t "in a numerical representation"):
 * a fixed-length float vector a critic head reads beside the LM's last hidden state (config
 * `critic_global_features`). Every vector `of` returns has `size` finite entries; trainers check
 * that at the boundary (`globalFeaturesOf`).
 */
export interface GlobalFeatures<S> {
  /** Declared length of every vector (≥ 1). A saved critic head records it. */
  readonly size: number;
  /** What each entry is (`turn/H`, …), in order; when given, its length is `size`. */
  readonly names?: readonly string[];
  /** The vector for a state. */
  of(state: S): readonly number[];
}

/** Result of one joint step. */
export interface StepResult<S> {
  /** The joint reward r_t (shared by all agents). */
  reward: number;
  /** s_{t+1}; for a terminal step, the final state. */
  next: S;
  /** True after the last turn or on early termination. */
  done: boolean;
  /** Task-specific details (reward breakdowns, feedback text, ...). */
  info: Record<string, unknown>;
}

/** An LLM Dec-POMDP environment over tasks of type T with state type S. */
export interface LLMDecPOMDP<T, S> {
  readonly name: string;
  readonly numAgents: number;
  /** Horizon H: number of turns. */
  readonly horizon: number;
  /** s_0 for a task. */
  initialState(task: T): S;
  /** o_{i,t}: the prompt agent i sees in state s. */
  observe(state: S, agent: number): string;
  /** Applies a joint action (one completion per agent). Must not mutate `state`. */
  step(state: S, jointAction: readonly string[]): Promise<StepResult<S>>;
  /** m_t for critics. */
  globalInfo(state: S): GlobalInfo;
  /** Optional: m_t as numbers, for critic heads that read them (see {@link GlobalFeatures}). */
  readonly globalFeatures?: GlobalFeatures<S>;
  /**
   * Optional: how an agent that uses a chat template should render this observation, for tasks
   * whose reference renders turns differently (HouseBuild: system + user through the template on
   * turn 1, raw text on follow-ups). Absent: the agent's own chat settings apply.
   */
  rendering?(state: S, agent: number): ObservationRendering;
}

/**
 * How a chat-formatted agent presents an observation. `chat`: render `[system?, user]` with the
 * chat template (the task's system prompt replaces the agent's); `raw`: use `observe()`'s text as
 * is, without the template. Agents with chat formatting off always use `observe()`'s text.
 */
export type ObservationRendering =
  | { kind: 'chat'; system?: string; user: string }
  | { kind: 'raw' };

/** Per-agent history h_{i,t} = (o_{i,0}, a_{i,0}, …, o_{i,t}). */
export interface AgentHistory {
  observations: string[];
  actions: string[];
}

/** Joint history: one {@link AgentHistory} per agent plus the rewards seen so far. */
export interface JointHistory {
  agents: AgentHistory[];
  rewards: number[];
}
