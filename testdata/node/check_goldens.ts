// The shapes the chat renderers' golden files must fit: the platforms'
// published type definitions (@slack/types, discord-api-types). A Go test
// (adapters/slack, adapters/discord: TestGoldensFitThePublishedTypes)
// writes each golden file into a TypeScript module as
//
//   export const g = <the golden JSON> satisfies SlackGolden;
//
// and runs the installed typescript's tsc --noEmit over it, so a golden
// that does not fit what the platform publishes (a wrong block, a field
// it does not know, a missing one) fails the test.
import type { KnownBlock, ModalView } from "@slack/types";
import type {
  APIModalInteractionResponse,
  RESTPostAPIChannelMessageJSONBody,
} from "discord-api-types/v10";

/** Wire is a type as it travels as JSON: a string enum member is the
 * string it stands for (TypeScript will not take "rich" for EmbedType.Rich,
 * which is what the JSON holds); everything else, property names and
 * which are optional included, is the published type. */
export type Wire<T> = T extends string
  ? `${T}`
  : T extends readonly (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;

/** A Slack golden: a card (chat.postMessage's text and blocks), the private
 * detail of a sensitive item, and the reason modal of a pending one. */
export interface SlackGolden {
  text: string;
  blocks: KnownBlock[];
  detail_text?: string;
  detail_blocks?: KnownBlock[];
  reason_modal?: ModalView;
}

/** A Slack modal golden (the edit form): a view. */
export type SlackModalGolden = ModalView;

/** A Discord card golden: the body of a message post or edit. */
export type DiscordGolden = Wire<Pick<RESTPostAPIChannelMessageJSONBody, "content" | "embeds" | "components">>;

/** A Discord modal golden: an interaction response that opens a modal.
 * discordgo's InteractionResponseData marshals "tts", "content" and
 * "embeds" always (no omitempty), which the published modal data does not
 * have: they are allowed here as the known extras, and only empty (false,
 * "", null), which is what every modal Countersign sends carries. */
export type DiscordModalGolden = Wire<Omit<APIModalInteractionResponse, "data">> & {
  data: Wire<APIModalInteractionResponse["data"]> & { tts?: false; content?: ""; embeds?: null };
};
