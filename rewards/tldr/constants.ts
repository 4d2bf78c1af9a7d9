/**
 * Word lists of the TLDR reward (tasks-reference §1.2). They are part of the task definition:
 * changing a word changes the reward.
 */

const words = (s: string): readonly string[] => Object.freeze(s.split(','));

/**
 * The reward's 106 stopwords (hard-coded in the reference, not NLTK/spaCy). Used by the Jaccard
 * term of level 4 only: level 3 counts unique words with stopwords included.
 */
export const TLDR_STOPWORDS: ReadonlySet<string> = new Set(
  words(
    'a,all,also,an,and,any,are,as,at,bad,be,been,being,both,but,by,can,could,did,do,does,each,few,' +
      'first,for,from,good,great,had,has,have,he,her,here,him,his,how,i,if,in,is,it,its,just,last,' +
      'left,little,long,low,many,may,me,might,more,most,much,must,my,new,no,not,now,of,old,on,only,' +
      'or,other,our,own,right,same,shall,should,so,some,such,than,that,the,their,them,then,there,' +
      'these,they,this,those,to,too,us,very,was,we,were,what,when,where,which,who,why,will,with,' +
      'would,you,your',
  ),
);

/** The eval logger's stopwords: the reward's list with `were` swapped for `high` (deliberate). */
export const TLDR_LOGGER_STOPWORDS: ReadonlySet<string> = new Set(
  [...TLDR_STOPWORDS].filter((w) => w !== 'were').concat(['high']),
);

/** A transition-word category and its phrases, in the reference's order. */
export interface TransitionCategory {
  readonly name: string;
  readonly phrases: readonly string[];
}

const cat = (name: string, phrases: string): TransitionCategory =>
  Object.freeze({ name, phrases: words(phrases) });

/** The 12 transition categories in the reference's dictionary order (the order phrases are reported). */
export const TLDR_TRANSITION_CATEGORIES: readonly TransitionCategory[] = Object.freeze([
  cat(
    'elaboration',
    'furthermore,moreover,additionally,also,besides,in addition,what is more,not only,as well as,' +
      'along with,coupled with,together with,likewise,similarly,equally important,by the same token,' +
      'in the same way,correspondingly,in like manner,comparatively,analogously',
  ),
  cat(
    'examples',
    'for example,for instance,specifically,particularly,namely,such as,including,especially,' +
      'in particular,to illustrate,as an illustration,case in point,to demonstrate,as evidence,' +
      'to exemplify,notably,markedly,chiefly,mainly,primarily,above all,most importantly',
  ),
  cat(
    'explanation',
    'that is,in other words,to put it simply,to clarify,indeed,in fact,actually,clearly,obviously,' +
      'to put it another way,to rephrase,more precisely,specifically speaking,what this means is,' +
      'the point is,essentially,basically,fundamentally,at its core,in essence,simply put,stated differently',
  ),
  cat(
    'cause_effect',
    'therefore,thus,consequently,as a result,hence,accordingly,for this reason,due to this,' +
      'because of this,so,then,thereby,wherefore,thence,ergo,as a consequence,in consequence,' +
      'it follows that,this leads to,this results in,this causes,this brings about,owing to,' +
      'on account of,thanks to,resulting from',
  ),
  cat(
    'contrast',
    'however,nevertheless,nonetheless,on the other hand,in contrast,while,whereas,although,' +
      'even though,despite this,but,yet,still,conversely,on the contrary,rather,instead,alternatively,' +
      'otherwise,in opposition,by contrast,contrarily,notwithstanding,regardless,all the same,even so,' +
      'be that as it may,in any case,at any rate',
  ),
  cat(
    'sequence',
    'first,second,third,next,then,after that,finally,lastly,initially,subsequently,meanwhile,' +
      'to begin with,to start with,in the beginning,at first,at the outset,primarily,secondly,thirdly,' +
      'following this,afterward,later,later on,in the meantime,simultaneously,concurrently,' +
      'at the same time,in conclusion,to conclude,ultimately,in the end,to summarize,in summary',
  ),
  cat(
    'emphasis',
    'indeed,certainly,surely,undoubtedly,without doubt,definitely,absolutely,positively,' +
      'unquestionably,indubitably,of course,naturally,obviously,clearly,evidently,manifestly,' +
      'undeniably,admittedly,granted,to be sure,in fact,as a matter of fact,notably,significantly',
  ),
  cat(
    'summary',
    'in summary,in conclusion,to summarize,to conclude,in short,in brief,briefly,to sum up,' +
      'on the whole,overall,all in all,in essence,essentially,basically,fundamentally,' +
      'in the final analysis,after all,ultimately,in the end,when all is said and done,the bottom line is',
  ),
  cat(
    'comparison',
    'similarly,likewise,in the same way,equally,just as,comparable to,in comparison,' +
      'by the same token,correspondingly,in like manner,along the same lines,in similar fashion,' +
      'analogously,by analogy,just like,much like,as with',
  ),
  cat(
    'concession',
    'although,though,even though,while,whereas,despite,in spite of,regardless of,notwithstanding,' +
      'admittedly,granted,even if,be that as it may,nevertheless,nonetheless,however,yet,still,all the same',
  ),
  cat(
    'condition',
    'if,unless,provided that,assuming that,supposing that,in case,in the event that,' +
      'on condition that,given that,as long as,so long as,only if,even if,whether or not,should,' +
      'were,had,otherwise,or else',
  ),
  cat(
    'time',
    'when,while,as,after,before,until,since,during,meanwhile,simultaneously,at the same time,' +
      'concurrently,previously,formerly,earlier,later,afterward,subsequently,eventually,finally,' +
      'recently,lately,nowadays,currently,presently,immediately',
  ),
]);
